"""The cross-device op-time model: op rows, its network costing, host profiles, few-shot power, measured ops."""
