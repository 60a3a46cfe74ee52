from traceql.cli.main import main

main()
