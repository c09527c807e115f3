# out_of_place.py is an MSCCLang program that generated some of these files; it needs msccl-tools.
collect_ignore = ["out_of_place.py"]
