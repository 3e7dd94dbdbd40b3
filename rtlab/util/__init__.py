"""Small shared pieces: where rtlab keeps its files, the infrastructure error, and file
readers whose every complaint names the file and line, a check's findings with their
fixes."""
