"""The push consumer of the queue ``orders``: it handles batches of up to five orders.

Order 7 always fails, so it is delivered three times (``max_retries=2``) and then moved to the
dead letter queue ``orders-dlq``, where ``conveyor peek orders-dlq`` shows it.

    conveyor worker examples.consumer:app
"""

import conveyor

app = conveyor.App()


@app.consumer("orders", max_batch_size=5, max_batch_timeout=1.0, max_retries=2, dead_letter_queue="orders-dlq")
def handle(batch: conveyor.MessageBatch) -> None:
    for message in batch.messages:
        order = message.body
        if order["order"] == 7:
            print(f"order 7 failed (delivery {message.attempts}); retrying it")
            message.retry()
            continue
        print(f"handled order {order['order']}: {order['amount']} (delivery {message.attempts})")
        message.ack()
