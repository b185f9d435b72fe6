"""The memory inspector: a local web page on the commands' store (served by
:mod:`._serve`, its pages :mod:`._web`)."""
