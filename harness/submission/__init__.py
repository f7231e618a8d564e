"""The upstream submission: a change of the series as mails and a
pull-request body (with the issue it fixes drafted), or as a comment for the
open pull request it duplicates, with its fail-before-fix evidence, its
measurements and the related work upstream."""
