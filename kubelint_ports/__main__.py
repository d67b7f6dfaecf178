from kubelint_ports.cli import main

main()
