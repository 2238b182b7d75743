pub fn report(orders: &[Order]) -> Vec<String> {
    orders.iter().map(Order::line).collect()
}
