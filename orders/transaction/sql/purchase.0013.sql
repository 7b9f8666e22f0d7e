-- atomic's purchase from one segment in one round trip (orders.transaction.procedure):
-- the statements the ORM's path sends (orders.transaction.sell), in its order: the
-- buyer's quota (orders.quota.quota_take), the order (with its payment window's
-- status and expiry: Order.terms), the stock's conditional UPDATE and its ledger row
-- (inventory's flashsale_stock_take), the commit. Outermost it is its own
-- transaction; inside a caller's, a savepoint, as Django's atomic nests.
--
-- One row back: outcome ('placed', 'sold_out', 'limit_reached', 'replaced'), the
-- order's id, the segment's stock after (sold out: as it is; otherwise NULL), the
-- microseconds the stock row was held, expires_at.
-- p_sale: the sale whose terms the purchase checked (Product.sale): 'replaced' when a
-- reset made another meanwhile, and nothing is written.
-- Past p_budget_us it signals 45000 and writes nothing. p_request: the request's name
-- (X-Request-ID), kept on the order.
CREATE PROCEDURE flashsale_purchase(
    IN p_product BIGINT, IN p_segment SMALLINT, IN p_quantity INT, IN p_user VARCHAR(64),
    IN p_key VARCHAR(128), IN p_instance VARCHAR(64), IN p_strategy VARCHAR(32),
    IN p_limit INT, IN p_delay_us INT, IN p_budget_us BIGINT, IN p_nested BOOLEAN,
    IN p_window_s INT, IN p_request VARCHAR(64), IN p_sale BIGINT)
BEGIN
    -- SYSDATE, not NOW: NOW is the CALL's start in every statement of a procedure.
    DECLARE v_started DATETIME(6) DEFAULT SYSDATE(6);
    DECLARE v_held DATETIME(6);
    DECLARE v_order BIGINT;
    DECLARE v_taken BOOLEAN;
    DECLARE v_after INT;
    DECLARE v_refused VARCHAR(16) DEFAULT NULL;
    DECLARE v_expires DATETIME(6) DEFAULT NULL;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        IF p_nested THEN ROLLBACK TO SAVEPOINT flashsale_purchase; ELSE ROLLBACK; END IF;
        RESIGNAL;
    END;

    IF p_nested THEN SAVEPOINT flashsale_purchase; ELSE START TRANSACTION; END IF;
    IF p_limit > 0 THEN
        UPDATE orders_buyerquota SET bought = bought + p_quantity
         WHERE product_id = p_product AND user_id = p_user AND bought <= p_limit - p_quantity;
        IF ROW_COUNT() = 0 THEN SET v_refused = 'limit_reached'; END IF;
    END IF;
    IF v_refused IS NULL THEN
        -- The order before the stock: the row is held from its UPDATE to the commit.
        IF p_window_s > 0 THEN SET v_expires = UTC_TIMESTAMP(6) + INTERVAL p_window_s SECOND; END IF;
        INSERT INTO orders_order (user_id, quantity, idempotency_key, instance, strategy, retries,
                                  created_at, product_id, status, expires_at, request_id)
        VALUES (p_user, p_quantity, p_key, p_instance, p_strategy, 0, UTC_TIMESTAMP(6), p_product,
                IF(p_window_s > 0, 'pending', 'placed'), v_expires, p_request);
        SET v_order = LAST_INSERT_ID();
        CALL flashsale_stock_take(p_product, p_sale, p_segment, p_quantity, p_key, v_order, p_instance,
                                  p_delay_us, v_taken, v_after, v_held);
        IF NOT v_taken THEN SET v_refused = IF(v_after IS NULL, 'replaced', 'sold_out'); END IF;
    END IF;
    IF v_refused IS NOT NULL THEN
        IF p_nested THEN ROLLBACK TO SAVEPOINT flashsale_purchase; ELSE ROLLBACK; END IF;
        SELECT v_refused, NULL, v_after, 0, NULL;
    ELSE
        IF TIMESTAMPDIFF(MICROSECOND, v_started, SYSDATE(6)) > p_budget_us THEN
            -- Past the purchase's deadline (a row lock waited long): its client has
            -- been answered 504 and moved on. Caught above, rolled back, raised.
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 1644, MESSAGE_TEXT = 'past the purchase deadline';
        END IF;
        IF p_nested THEN RELEASE SAVEPOINT flashsale_purchase; ELSE COMMIT; END IF;
        SELECT 'placed', v_order, v_after, TIMESTAMPDIFF(MICROSECOND, v_held, SYSDATE(6)), v_expires;
    END IF;
END
