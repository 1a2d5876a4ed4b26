# CPython's tokenizer ends a number at a keyword that may follow it (`1if`, `0or`, `2else`,
# `1for`, `1and`, `1not`; a SyntaxWarning since 3.12): the program means what it does with spaces.
def pick(x: int) -> int:
    return 1if x>0else 2

def either(x: int) -> bool:
    return x==1or x==3and x>0

def count(n: int) -> int:
    t = 0
    for i in range(n):
        if i%2==0and not i==4:
            t += 10if i>2else 1
    return t

# call: pick(5) -> 1
# call: pick(-5) -> 2
# call: either(1) -> True
# call: either(3) -> True
# call: either(2) -> False
# call: count(7) -> 12
