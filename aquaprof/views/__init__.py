"""Views of a Report: each module renders one output from the report's
data and reads nothing but the report (and the shared units)."""
