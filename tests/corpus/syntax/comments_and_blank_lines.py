# A comment before everything.

def f(x: int) -> int:  # after the header
        # a comment indented deeper than the body
    y = x  # trailing

  # a comment indented less than the body

    if y > 0:
        # inside a block
        y += 1
# a comment at column 1 inside the function
        y += 1
    return y
    # a comment after the last statement

# call: f(1) -> 3
# call: f(-1) -> -1
