def f(x:	int)	->	int:
    y	=	x	+	1
    return	y	*	2

# call: f(3) -> 8
