"""Analyses of reports: GPU statistics, diagnosis, anomalies, comparison,
overhead compensation, merging, stragglers and the history of runs. Each
reads reports and returns plain results; none renders or records."""
