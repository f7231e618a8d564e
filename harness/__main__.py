import sys

try:
    from harness.cli import run_as_program
except KeyboardInterrupt:  # Ctrl-C while the harness loads
    print("error: interrupted (Ctrl-C)", file=sys.stderr)
    sys.exit(130)

run_as_program()
