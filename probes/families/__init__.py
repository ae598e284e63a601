"""The probe families: each a module (``chase.py``) or a package (``hopper/``, its units and their shared part)
holding its probe declarations and its own kernel files.  The registry imports every module of this package
and measures those that declare a probe in the order of their ``RUN_ORDER``; a family imports the kit and the
registry, never another family."""
