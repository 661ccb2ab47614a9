from intellagent.cli import main

main()
