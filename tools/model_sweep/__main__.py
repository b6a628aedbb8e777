from tools.model_sweep.cli import main

raise SystemExit(main())
