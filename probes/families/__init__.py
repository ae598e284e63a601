"""The probe families: each a module (``chase.py``) or a package (``hopper/``, its units and their shared part)
holding its probe declarations and its own kernel files.  The registry imports every module of this package
and measures those that declare a probe in the order of the analysis families that name them (each
``analysis/<family>.py``'s ``FAMILY``, its ``probe_modules``); a family imports the kit and the registry, never
another family."""
