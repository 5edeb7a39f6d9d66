"""The one test of a whole-number argument: an int and not a bool (True
is an int to Python, never a count to a user), within its bounds."""
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from typing_extensions import TypeGuard


def whole(value: Any, low: Optional[int] = None,
          high: Optional[int] = None) -> "TypeGuard[int]":
    """value is an int (not a bool) from low to high, both included."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (low is None or value >= low)
            and (high is None or value <= high))
