# The function body and 16 nested ifs: the 17th indented block is one too many.
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
                                                                if x > 15:
                                                                    r = x
    return r
# error: 20:69 nested too deeply
