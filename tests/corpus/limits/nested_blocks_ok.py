# The function body and 15 nested ifs: 16 nested blocks.
def f(x: int) -> int:
    r = 0
    if x > 0:
        if x > 1:
            if x > 2:
                if x > 3:
                    if x > 4:
                        if x > 5:
                            if x > 6:
                                if x > 7:
                                    if x > 8:
                                        if x > 9:
                                            if x > 10:
                                                if x > 11:
                                                    if x > 12:
                                                        if x > 13:
                                                            if x > 14:
                                                                r = x
    return r

# call: f(20) -> 20
# call: f(14) -> 0
