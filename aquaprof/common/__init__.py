"""What every room shares and nothing here depends on: times, bytes and
words as text, atomic file writes, progress lines."""
