from traceql.cli.app import main

main()
