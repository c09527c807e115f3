# extra_programs.py is an MSCCLang program that generated some of these files; it needs msccl-tools.
collect_ignore = ["extra_programs.py"]
