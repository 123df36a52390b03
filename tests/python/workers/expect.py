"""Framework-neutral assertions for the check modules."""


def raises(exc, fn, *words):
    """fn() must raise `exc` whose message contains every one of `words`;
    returns the exception."""
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), "%r not in %s" % (w, e)
        return e
    raise AssertionError("%s not raised" % exc.__name__)
