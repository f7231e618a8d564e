"""The upstream submission: the series as mails and a pull-request body, with
its fail-before-fix evidence and the related work upstream."""
