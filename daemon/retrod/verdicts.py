"""The verdicts a phase can be given (DESIGN §3), worst last."""

VERDICTS = ("high_impact", "moderate_impact", "small_impact", "exploratory_useful",
            "exploratory_waste", "avoidable_waste")
