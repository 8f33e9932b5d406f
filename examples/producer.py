"""Send ten orders to the queue ``orders`` of the deployment in ./.conveyor (or $CONVEYOR_URL).

python examples/producer.py
"""

import conveyor

cv = conveyor.connect()
try:
    orders = cv.queue("orders")
except conveyor.QueueNotFound:
    orders = cv.create_queue("orders")

for n in range(1, 11):
    sent = orders.send({"order": n, "amount": n * 10})
    print(f"sent order {n} as message {sent.id}")
print(f"backlog: {sent.metrics.backlog_count} messages")
cv.close()
