export HOME=${state}/rabbit RABBITMQ_NODENAME=rabbit@localhost
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=${AMQP_PORT} RABBITMQ_DIST_PORT=${RABBIT_DIST_PORT}
export ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=${EPMD_PORT} ERL_CRASH_DUMP=${state}/logs/erl_crash.dump
export RABBITMQ_MNESIA_BASE=${state}/rabbit/mnesia RABBITMQ_LOG_BASE=${state}/logs/rabbitmq
export RABBITMQ_CONFIG_FILE=${state}/rabbit/rabbitmq RABBITMQ_CONF_ENV_FILE=${state}/rabbit/rabbitmq-env.conf
export RABBITMQ_ENABLED_PLUGINS_FILE=${state}/rabbit/enabled_plugins RABBITMQ_PID_FILE=${state}/rabbit/beam.pid
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
