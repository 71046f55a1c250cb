VALUE = "imported"
