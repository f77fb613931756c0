import sys, bpecore; sys.modules[__name__] = bpecore  # `import tiktoken` gives bpecore
