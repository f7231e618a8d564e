"""The series on an installed vLLM: locating the package, checking it against
its RECORD, installing a tier over it, its receipt, status and uninstall."""
