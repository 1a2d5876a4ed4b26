def f() -> int:
	return 1
# error: 2:1 tabs and form feeds in indentation
