"""The quilt series: reading it, applying it, linting it, and committing it
onto a checkout."""
