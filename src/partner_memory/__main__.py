from partner_memory.cli import main

main()
