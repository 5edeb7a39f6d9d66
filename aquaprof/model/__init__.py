"""A report as data: its fields and their checks (schema), the bounds a
file must keep to be read (limits), files read and written, and the
Report, StageStats and Timing classes that hold one run. Imports no
analysis and no view."""
