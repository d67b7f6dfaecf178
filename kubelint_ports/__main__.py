from kubelint_ports.cli import main

if __name__ == "__main__":  # worker processes started by spawn import this module as __mp_main__
    main()
