// K-quants: to come
