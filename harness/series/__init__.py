"""The quilt series: reading it, applying it, linting it, and exporting it."""
