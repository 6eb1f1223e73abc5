/**
 * Opens AMQP connections with a bounded connect timeout and a connection name that
 * shows up in the broker's connection list.
 */
import amqp, { type ChannelModel } from "amqplib";

export async function connectBroker(url: string, name: string): Promise<ChannelModel> {
  return amqp.connect(url, { timeout: 5000, clientProperties: { connection_name: name } });
}
