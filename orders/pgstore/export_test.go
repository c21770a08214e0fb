package pgstore

// The page queries the store runs, for the tests to explain.
const (
	OrdersPageSQL       = ordersPageSQL
	OrdersPageStatusSQL = ordersPageStatusSQL
)
