-- Firmware versions the nodes export (`kind = 'inventory'`, one row per
-- change): the lemon report reads the latest of each flagged node.
CREATE INDEX health_inventory ON health(node, check_name, entity, at) WHERE kind = 'inventory';
