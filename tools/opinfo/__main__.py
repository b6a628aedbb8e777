from tools.opinfo.cli import main

raise SystemExit(main())
