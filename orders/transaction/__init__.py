"""The transaction seller: every strategy but the gate. The purchase's order and its
stock deduction commit in one database transaction, under the strategy's lock
(``sell``), or as one stored-procedure call where no Python runs between the
statements (``procedure``: ``atomic`` on one segment)."""
