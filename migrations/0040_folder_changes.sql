-- A main transcript's working folder is settled from its holders' changes of folder
-- (ingest_settle_file_cwds, accounting.md §4): a file has a few of them among thousands of
-- holders, and each file read from its start (every file, on a first catch-up) looked for
-- them through all its holders by the primary key. Their own index holds only them.
CREATE INDEX line_holders_folder_changes ON retrod.line_holders (file_id, "offset")
    WHERE cwd_changed AND line_uuid IS NOT NULL;
