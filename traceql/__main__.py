import signal
import sys

# `kill PID`, a closed terminal or CI's timeout while Python still loads traceql: stop as Ctrl-C does
# (traceql.cli.main sets the same once loaded), not killed with no message and no exit code of ours
for _name in ("SIGTERM", "SIGHUP"):
    if hasattr(signal, _name) and signal.getsignal(getattr(signal, _name)) == signal.SIG_DFL:
        signal.signal(getattr(signal, _name), signal.default_int_handler)

try:
    from traceql.cli import run
except KeyboardInterrupt:  # Ctrl-C while Python loads traceql: no traceback, the exit code of an interrupt
    sys.stderr.write("traceql: interrupted\n")
    sys.exit(130)

run()
