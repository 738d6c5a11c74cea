-- accounting.md §2.1: a file is replaced not only when its inode changes — file systems hand a deleted
-- file's inode number to the next file at once — but also when the bytes before the stored
-- offset are no longer the ones read. `head` fingerprints them, as log shippers do:
-- '<n>:<sha1 of the first n bytes>', n up to 4096 and never past the offset ('' = none yet).
ALTER TABLE retrod.files ADD COLUMN head TEXT NOT NULL DEFAULT '';
