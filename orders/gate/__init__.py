"""The gate's room: a sale decided in Redis (``sale``) and written to the database
afterwards by the persisters (``persister``)."""
