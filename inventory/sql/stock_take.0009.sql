-- A conditional deduction from one stock segment of one sale, and its ledger row:
-- inventory's part of the one-call purchase (orders/transaction/sql/purchase.*.sql
-- calls it), the statements stock_deduct sends for one segment under
-- CONDITIONAL_UPDATE (inventory.services._conditional_take, then the ledger row).
-- Runs inside the caller's transaction; a refusal writes nothing.
--
-- p_sale: the sale whose terms the purchase checked (Product.sale); the rows of
-- another (a reset made them meanwhile) are not taken from.
-- OUT p_taken: whether the segment had p_quantity; OUT p_after: what the segment
-- holds after the deduction (refused: what it holds; NULL: the sale is not there any
-- more); OUT p_held: when this transaction took the stock row.
CREATE PROCEDURE flashsale_stock_take(
    IN p_product BIGINT, IN p_sale BIGINT, IN p_segment SMALLINT, IN p_quantity INT, IN p_flag VARCHAR(128),
    IN p_reference VARCHAR(64), IN p_instance VARCHAR(64), IN p_delay_us INT,
    OUT p_taken BOOLEAN, OUT p_after INT, OUT p_held DATETIME(6))
BEGIN
    -- LAST_INSERT_ID(expr) hands back what the UPDATE wrote, with no second read.
    UPDATE inventory_stock
       SET quantity = LAST_INSERT_ID(quantity - p_quantity), version = version + 1
     WHERE product_id = p_product AND segment = p_segment AND sale = p_sale AND quantity >= p_quantity;
    SET p_taken = ROW_COUNT() > 0;
    IF NOT p_taken THEN
        -- A scalar subquery: NULL when the row is gone, with no "no data" condition.
        SET p_after = (SELECT quantity FROM inventory_stock
                        WHERE product_id = p_product AND segment = p_segment AND sale = p_sale);
    ELSE
        -- SYSDATE, not NOW: NOW is the CALL's start in every statement of a procedure.
        SET p_held = SYSDATE(6), p_after = LAST_INSERT_ID();
        IF p_delay_us > 0 THEN
            DO SLEEP(p_delay_us / 1000000);  -- FLASHSALE_SECTION_DELAY_MS: the section's business work
        END IF;
        INSERT INTO inventory_stockflow (product_id, segment, quantity, operation_flag, order_reference,
                                         quantity_before, quantity_after, instance, created_at)
        VALUES (p_product, p_segment, p_quantity, p_flag, p_reference, p_after + p_quantity, p_after,
                p_instance, UTC_TIMESTAMP(6));
    END IF;
END
