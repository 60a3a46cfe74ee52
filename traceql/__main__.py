import sys

try:
    from traceql.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads traceql: no traceback, the exit code of an interrupt
    sys.stderr.write("traceql: interrupted\n")
    sys.exit(130)

main()
