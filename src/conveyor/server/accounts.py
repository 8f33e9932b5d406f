"""The server's accounts: one engine, viewed as each request's account (see
:mod:`conveyor.engine.accounts`, where the account layer lives so that embedded clients use it too)."""

from conveyor.engine.accounts import (
    ACCOUNT_ID_PATTERN,
    LOCAL_ACCOUNT,
    AccountEngine,
    check_account_id,
    qualify,
    split,
)

__all__ = ["ACCOUNT_ID_PATTERN", "LOCAL_ACCOUNT", "AccountEngine", "check_account_id", "qualify", "split"]
